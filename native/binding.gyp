{
  "targets": [
    {
      "target_name": "tidemark_tracker",
      "sources": [
        "src/addon.cc",
        "src/common/coalescer.cc",
        "src/common/factory.cc",
        "src/common/usn_record.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_CPP_EXCEPTIONS_ALL", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "conditions": [
        ["OS=='linux'", {
          "sources": [
            "src/linux/reader_base.cc",
            "src/linux/fanotify_backend.cc",
            "src/linux/inotify_backend.cc"
          ],
          "libraries": ["-lpthread"]
        }],
        ["OS=='win'", {
          "sources": ["src/windows/usn_backend.cc", "src/windows/vss_snapshot.cc"],
          "libraries": ["vssapi.lib", "ole32.lib"],
          "defines": ["_HAS_EXCEPTIONS=1", "WIN32_LEAN_AND_MEAN", "NOMINMAX"],
          "msvs_settings": { "VCCLCompilerTool": { "ExceptionHandling": 1, "AdditionalOptions": ["/std:c++17"] } }
        }],
        ["OS=='mac'", {
          "xcode_settings": {
            "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
            "CLANG_CXX_LIBRARY": "libc++",
            "MACOSX_DEPLOYMENT_TARGET": "10.15",
            "OTHER_CPLUSPLUSFLAGS": ["-std=c++17"]
          }
        }]
      ]
    }
  ]
}
