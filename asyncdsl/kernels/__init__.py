"""asyncdsl's kernel library: host functions that allocate their outputs, pick a configuration
and launch kernels built from `asyncdsl.blocks`.  torch tensors run on the GPU; numpy arrays run
in the interpreter."""
