"""torch.distributed.elastic.utils: the data helpers elastic training scripts import (utils.data)."""
