"""Errors the kernels raise about their data (pure Python: every backend imports it).

A kernel knows arrays only; the executor adds the op and tile names (exception note).
"""


def label_error(kernel, value, num_classes, ignore_index=None):
    """A label outside [0, num_classes) that is not ignore_index (None: the kernel has none)."""
    ignored = "" if ignore_index is None else f" and not ignore_index {ignore_index}"
    return IndexError(f"{kernel}: labels hold {int(value)}, outside the class range "
                      f"[0, {num_classes}){ignored}")


def vocab_error(kernel, value, vocab_size):
    """An embedding id outside the whole vocabulary [0, vocab_size) (not just this tile's)."""
    return IndexError(f"{kernel}: the index tensor holds id {int(value)}, outside the "
                      f"vocabulary [0, {vocab_size})")
