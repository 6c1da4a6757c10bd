"""torch.stft and torch.istft: the short-time Fourier transform of a signal (frames hop_length apart, each
multiplied by the window and transformed by trainrun.fft) and its inverse (each frame transformed back,
windowed, overlap-added and divided by the summed squared window), with PyTorch's arguments and defaults
(center=True with reflect padding, hop n_fft // 4, a rectangular window when none is given). Both are
compositions of differentiable ops; complex values are ComplexTensors."""
import warnings

import trainrun
from trainrun import _C
from trainrun._complex import ComplexTensor


def _window(window, win_length, n_fft, like, where):
    """The window as n_fft values: given (win_length long) or rectangular, zero-padded evenly on both sides."""
    if win_length > n_fft or win_length <= 0:
        raise RuntimeError(f"{where}: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is None:
        window = _C.ones([win_length], dtype=like.dtype, device=like.device)
    elif window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"{where}: expected a 1D window tensor of size equal to win_length={win_length}, but "
                           f"got window with size {list(window.shape)}")
    left = (n_fft - win_length) // 2
    if left or n_fft - win_length - left:
        window = trainrun.nn.functional.pad(window, (left, n_fft - win_length - left))
    return window


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",  # noqa: A002
         normalized=False, onesided=None, return_complex=None):
    """(B, n_fft // 2 + 1, frames) complex coefficients of input (B, L) or (L) (all n_fft with onesided=False)."""
    if isinstance(input, ComplexTensor):
        raise NotImplementedError("stft of a complex input is not supported")
    if return_complex is None:
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                           "require that return_complex=True in a future PyTorch release.")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if hop_length <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop_length}")
    signal = input.unsqueeze(0) if input.ndim == 1 else input
    if not signal.is_floating_point():
        signal = signal.to(_C._ops.get_default_dtype())
    if center:
        pad = n_fft // 2
        signal = trainrun.nn.functional.pad(signal.unsqueeze(1), (pad, pad), mode=pad_mode).squeeze(1)
    length = signal.shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    frames = signal.unfold(-1, n_fft, hop_length) * _window(window, win_length, n_fft, signal, "stft")
    onesided = True if onesided is None else onesided
    norm = "ortho" if normalized else "backward"
    spectrum = trainrun.fft.rfft(frames, dim=-1, norm=norm) if onesided else \
        trainrun.fft.fft(frames, dim=-1, norm=norm)
    spectrum = spectrum.transpose(-1, -2)  # (B, freq, frames)
    if input.ndim == 1:
        spectrum = spectrum.squeeze(0)
    if return_complex:
        return spectrum
    warnings.warn("stft with return_complex=False is deprecated. In a future pytorch release, stft will return "
                  "complex tensors for all inputs, and return_complex=False will raise an error.", UserWarning,
                  stacklevel=2)
    return trainrun.view_as_real(spectrum)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,  # noqa: A002
          onesided=None, length=None, return_complex=False):
    """The signal whose stft is input: each frame's inverse transform, windowed and overlap-added, divided by
    the overlap-added squared window."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("istft requires a complex-valued input tensor")
    if return_complex:
        raise NotImplementedError("istft(return_complex=True) is not supported")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    spectrum = input.unsqueeze(0) if input.ndim == 2 else input
    frequencies, count = spectrum.shape[-2], spectrum.shape[-1]
    onesided = (frequencies != n_fft) if onesided is None else onesided
    expected = n_fft // 2 + 1 if onesided else n_fft
    if frequencies != expected:
        raise RuntimeError(f"istft: expected the frequency dimension (2nd from last) of the input to be "
                           f"{expected}, but got {frequencies}")
    norm = "ortho" if normalized else "backward"
    spectrum = spectrum.transpose(-1, -2)  # (B, frames, freq)
    frames = trainrun.fft.irfft(spectrum, n=n_fft, dim=-1, norm=norm) if onesided else \
        trainrun.fft.ifft(spectrum, n=n_fft, dim=-1, norm=norm).real
    win = _window(window, win_length, n_fft, frames, "istft")
    frames = frames * win
    total = n_fft + hop_length * (count - 1)
    fold = trainrun.nn.functional.fold
    signal = fold(frames.transpose(1, 2), (1, total), (1, n_fft), stride=(1, hop_length)).reshape(
        [frames.shape[0], total])
    envelope = fold((win * win).reshape([1, n_fft, 1]).expand([1, n_fft, count]), (1, total), (1, n_fft),
                    stride=(1, hop_length)).reshape([total])
    start = n_fft // 2 if center else 0
    end = total - n_fft // 2 if center else total
    if length is not None:
        end = start + length
    used = envelope[start:min(end, total)]
    if used.numel() and float(used.abs().min()) < 1e-11:
        raise RuntimeError("istft: window overlap add min: the window's squared sum is zero somewhere (pick a "
                           "window and hop_length that overlap)")
    signal = signal[:, start:min(end, total)] / used
    if length is not None and end > total:
        signal = trainrun.nn.functional.pad(signal, (0, end - total))
    return signal.squeeze(0) if input.ndim == 2 else signal


def _install():
    trainrun.stft, trainrun.istft = stft, istft
    _C.Tensor.stft = stft
    _C.Tensor.istft = lambda self, *args, **kwargs: istft(self, *args, **kwargs)
    ComplexTensor.istft = lambda self, *args, **kwargs: istft(self, *args, **kwargs)


_install()
