"""netcl.onnx: export a model's forward to ONNX (checked by ``onnx.checker``, run by any ONNX
runtime) and load ONNX models as netcl Modules that run on every netcl device.

Needs the ``onnx`` package (``pip install 'netcl[onnx]'``); nothing in training does.

Examples:
    >>> import numpy as np, os, tempfile
    >>> import netcl.nn as nn
    >>> from netcl.core.tensor import Tensor
    >>> model = nn.Sequential(nn.Linear(4, 3, device="cpu"), nn.ReLU())
    >>> x = Tensor.from_host(model[0].weight.queue, np.ones((2, 4), np.float32))
    >>> path = export(model, x, os.path.join(tempfile.mkdtemp(), "m.onnx"))
    >>> back = load(path, device="cpu")
    >>> bool(np.allclose(back(x).to_host(), model(x).to_host()))
    True
"""

from ._export import DEFAULT_OPSET as DEFAULT_OPSET
from ._export import OnnxExportError as OnnxExportError
from ._export import export as export
from ._load import OnnxImportError as OnnxImportError
from ._load import OnnxModule as OnnxModule
from ._load import load as load

__all__ = ["DEFAULT_OPSET", "OnnxExportError", "OnnxImportError", "OnnxModule", "export", "load"]
