"""cbench builders: turn case specifications in model_zoo/ into released artifacts.

Heavy dependencies (jax, haiku, tracr) live only here; the client never imports this package.
"""
