# Sourced by the device-host CPU scripts: `cpu_config BIN FILE` writes a plugins.toml to FILE
# that loads only BIN's cpu-simd and interpreter plugins (no CUDA executor asks to claim).
cpu_config() {
  cat > "$2" <<TOML
plugin_dirs = []
[[executor]]
name = "cpu-simd"
library = "$1/libthunder_cpu_simd.so"
priority = 20
[[executor]]
name = "interpreter"
library = "$1/libthunder_interpreter.so"
priority = 0
TOML
}
