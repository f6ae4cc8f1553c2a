"""Building blocks written in the DSL, for kernels to be assembled from: pipelines, tile
schedulers, the tensor-core K loop, epilogues and row plans, one module per concept."""
