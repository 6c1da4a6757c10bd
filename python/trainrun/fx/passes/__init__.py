"""torch.fx.passes: shape_prop.ShapeProp (each node's output shape, dtype and strides recorded in node.meta)."""
from trainrun.fx.passes import shape_prop  # noqa: F401
