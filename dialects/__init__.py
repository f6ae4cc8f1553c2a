"""The IR of asyncdsl: the `asyncdsl` dialect and the `ptx` dialect."""
