"""The compiler passes, one per module; `pipeline` names the default order."""
