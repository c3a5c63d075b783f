cmd_Release/obj.target/tidemark_fsmeta/fsmeta.o := g++ -o Release/obj.target/tidemark_fsmeta/fsmeta.o ../fsmeta.cc '-DNODE_GYP_MODULE_NAME=tidemark_fsmeta' '-DUSING_UV_SHARED=1' '-DUSING_V8_SHARED=1' '-DV8_DEPRECATION_WARNINGS=1' '-D_GLIBCXX_USE_CXX11_ABI=1' '-D_FILE_OFFSET_BITS=64' '-D_LARGEFILE_SOURCE' '-D__STDC_FORMAT_MACROS' '-DOPENSSL_NO_PINSHARED' '-DOPENSSL_THREADS' '-DNAPI_VERSION=8' '-DNAPI_DISABLE_CPP_EXCEPTIONS' '-DBUILDING_NODE_EXTENSION' -I/usr/include/node -I/usr/src -I/usr/deps/openssl/config -I/usr/deps/openssl/openssl/include -I/usr/deps/uv/include -I/usr/deps/zlib -I/usr/deps/v8/include -I../../../node_modules/node-addon-api  -fPIC -pthread -Wall -Wextra -Wno-unused-parameter -m64 -O3 -fno-omit-frame-pointer -fno-rtti -fno-exceptions -std=gnu++17 -std=c++17 -Wall -MMD -MF ./Release/.deps/Release/obj.target/tidemark_fsmeta/fsmeta.o.d.raw   -c
Release/obj.target/tidemark_fsmeta/fsmeta.o: ../fsmeta.cc \
 ../../../node_modules/node-addon-api/napi.h /usr/include/node/node_api.h \
 /usr/include/node/js_native_api.h \
 /usr/include/node/js_native_api_types.h \
 /usr/include/node/node_api_types.h \
 ../../../node_modules/node-addon-api/napi-inl.h \
 ../../../node_modules/node-addon-api/napi.h \
 ../../../node_modules/node-addon-api/napi-inl.deprecated.h
../fsmeta.cc:
../../../node_modules/node-addon-api/napi.h:
/usr/include/node/node_api.h:
/usr/include/node/js_native_api.h:
/usr/include/node/js_native_api_types.h:
/usr/include/node/node_api_types.h:
../../../node_modules/node-addon-api/napi-inl.h:
../../../node_modules/node-addon-api/napi.h:
../../../node_modules/node-addon-api/napi-inl.deprecated.h:
