"""`gradfix trace`: run a training script under torch's public hooks and report the autograd
bugs it actually hits, at the line the fix must change.

- `runner` runs the script (or module) in this interpreter and stops it after N optimizer
  steps;
- `recorder` installs the hooks (a `TorchFunctionMode`, `saved_tensors_hooks`, optimizer step
  hooks, a line tracer on the user's own files) and keeps what they saw as `Observation`s;
- `stores` finds, in the user's source, the statements that may keep a tensor (appends,
  attribute and index stores, accumulations), which the line tracer watches;
- `observations` is the plain data passed from the recorder to the rest (no torch);
- `fixes` turns each observation into a `Finding` whose fix comes from the rule's own fix
  builder, and writes the fixes.

Only `runner` and `recorder` import torch, and only when `trace` runs.
"""
