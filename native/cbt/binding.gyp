# tidemark_cbt: the Linux changed-block tracker (eBPF + libbpf) as a separate N-API addon, so a machine
# without clang/libbpf/BTF still builds the main addon. Build: `node native/cbt/build.mjs` (or node-gyp here).
{
  "targets": [
    {
      "target_name": "tidemark_cbt",
      "conditions": [
        ["OS=='linux'", {
          "sources": ["src/addon.cc"],
          "include_dirs": [
            "<!(node -p \"require('node-addon-api').include_dir\")",
            "src",
            "<(SHARED_INTERMEDIATE_DIR)/cbt"
          ],
          "defines": ["NAPI_CPP_EXCEPTIONS", "NAPI_VERSION=8"],
          "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
          "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wno-missing-field-initializers"],
          # Debian ships libbpf.a without -fPIC, so link the shared libbpf (runtime dependency: libbpf1).
          "libraries": ["-lbpf"],
          "actions": [
            {
              "action_name": "gen_bpf_skeleton",
              "inputs": ["src/cbt.bpf.c", "src/cbt_shared.h", "gen-bpf.sh"],
              "outputs": ["<(SHARED_INTERMEDIATE_DIR)/cbt/cbt.skel.h"],
              "action": ["sh", "gen-bpf.sh", "<(SHARED_INTERMEDIATE_DIR)/cbt"]
            }
          ]
        }, {
          "type": "none"
        }]
      ]
    }
  ]
}
