"""How each user-level copy op becomes hardware copies: one module per copy engine."""
