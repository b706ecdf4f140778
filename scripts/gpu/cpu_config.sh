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

# `cpu_setup BIN`: the set-up every device-host CPU script starts with. Sets `bin` (BIN's
# absolute path), `out` ($OUT, made), `cores` ($CORES, default 2,3) and `cfg` (a plugins.toml
# for BIN's plugins, written by `cpu_config`).
cpu_setup() {
  bin="$(cd "$1" && pwd)"
  out="${OUT:-gpu-out}"
  cores="${CORES:-2,3}"
  mkdir -p "$out"
  cfg="$bin/plugins-cpu.toml"
  cpu_config "$bin" "$cfg"
}
