// Built by tests/package/consumer_cxx against the installed package: <dtrain.h> compiles as C++ and
// links (shared and static); prints the version the library reports.
#include <dtrain.h>

#include <cstdio>
#include <cstring>

int main() {
    dt_config cfg;
    dt_config_defaults(&cfg);
    std::printf("dtrain %s, bf16 %s, f16 size %zu\n", dt_version_string(), dt_dtype_name(DT_BF16),
                dt_dtype_size(DT_F16));
    return std::strlen(dt_version_string()) > 0 ? 0 : 1;
}
