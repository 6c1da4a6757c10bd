"""trainrun.utils.model_zoo, as torch.utils.model_zoo: load_url is trainrun.hub.load_state_dict_from_url."""
from trainrun.hub import load_state_dict_from_url as load_url  # noqa: F401
