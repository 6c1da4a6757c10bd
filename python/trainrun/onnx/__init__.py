"""torch.onnx's names, for scripts and models that import it: trainrun writes no ONNX files. export() and
dynamo_export() raise OnnxExporterError naming what trainrun has instead (trainrun.export.export for a graph
with the weights, trainrun.aot_compile for a library a C++ program runs without Python); is_in_onnx_export()
is False (model code that branches on it takes its eager path), as it is in PyTorch outside an export."""
import enum

__all__ = ["OnnxExporterError", "OperatorExportTypes", "TrainingMode", "dynamo_export", "export",
           "is_in_onnx_export", "select_model_mode_for_export"]


class OnnxExporterError(RuntimeError):
    """PyTorch's base error of the ONNX exporter."""


class TrainingMode(enum.IntEnum):
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


def is_in_onnx_export():
    """Whether an ONNX export is tracing the model now: never, here."""
    return False


def _refuse(what):
    raise OnnxExporterError(f"torch.onnx.{what}: trainrun does not write ONNX; trainrun.export.export(model, args) "
                            "captures the model as a graph with its weights, and trainrun.aot_compile(exported, path) "
                            "writes a library a C++ program runs without Python")


def export(model, args=(), f=None, *pos, **kwargs):
    _refuse("export")


def dynamo_export(model, *args, **kwargs):
    _refuse("dynamo_export")


def select_model_mode_for_export(model, mode):
    """PyTorch's context manager over the model's training mode during an export; an export here always fails
    first, so it only sets the mode (TrainingMode.EVAL / TRAINING) and restores it."""
    import contextlib

    @contextlib.contextmanager
    def scope():
        was = model.training
        if mode != TrainingMode.PRESERVE:
            model.train(mode == TrainingMode.TRAINING)
        try:
            yield
        finally:
            model.train(was)
    return scope()
