{
  "targets": [
    {
      "target_name": "tidemark_iotest",
      "sources": ["iotest.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-Wall", "-O2"],
      "ldflags": ["-pthread"],
      "xcode_settings": { "OTHER_CPLUSPLUSFLAGS": ["-std=c++17", "-O2"] },
      "msvs_settings": { "VCCLCompilerTool": { "AdditionalOptions": ["/std:c++17"] } }
    }
  ]
}
