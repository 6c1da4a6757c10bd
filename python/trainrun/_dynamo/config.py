"""torch._dynamo.config's settings that trainrun.compile reads (at each call, so a change takes effect at once).
Other settings PyTorch scripts set (suppress_errors, ...) are accepted as plain attributes: trainrun's recordings
have no compiler errors to suppress (a loop the system compiler refuses runs its ops one by one instead)."""
cache_size_limit = 8  # recordings kept per compiled function before calls with new guards run eagerly (PyTorch's)
