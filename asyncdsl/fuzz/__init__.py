"""asyncdsl's differential fuzzers: random kernels written with the public API, each against an
independent numpy model (`copies`: one `async_copy` a case)."""
