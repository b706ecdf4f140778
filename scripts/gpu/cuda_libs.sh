# Sourced by the GPU scripts: puts the CUDA libraries the plugins load at run time (NVRTC, and
# cuDNN where present) on the loader's path, from the toolkit or from PyTorch's wheels.
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; p = os.path.dirname(nvidia.__path__[0]); print(" ".join(os.path.join(r) for r, _, f in os.walk(os.path.join(p, "nvidia")) if any(x.startswith(("libnvrtc.so", "libcudnn.so")) for x in f)))' 2>/dev/null); do
  export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
