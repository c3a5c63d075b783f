{
  "targets": [
    {
      "target_name": "tidemark_aead",
      "sources": ["aead.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-Wall", "-O2"],
      "ldflags": ["-Wl,-z,now"],
      "xcode_settings": { "OTHER_CPLUSPLUSFLAGS": ["-std=c++17", "-O2"] }
    }
  ]
}
