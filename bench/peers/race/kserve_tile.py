"""KServe ModelServer serving tile: output = numpy.tile(input, repeats).

    python kserve_tile.py --http_port P --grpc_port G   (kserve's own options)
"""
import uuid

import numpy as np
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve.utils.utils import from_np_dtype


class Tile(Model):
    def __init__(self):
        super().__init__("tile")
        self.ready = True

    def predict(self, payload: InferRequest, headers=None):
        ins = {i.name: i.as_numpy() for i in payload.inputs}
        out = np.tile(ins["input"], ins["repeats"].reshape(-1).tolist())
        o = InferOutput(name="output", shape=list(out.shape), datatype=from_np_dtype(out.dtype))
        # Binary (raw) output when the request asks for it: the binary tensor extension over
        # REST (binary_data_output, or binary_data on the requested output), raw contents over gRPC.
        wanted = payload.request_outputs or []
        binary = payload.use_binary_outputs or any(r.binary_data for r in wanted)
        o.set_data_from_numpy(out, binary_data=binary)
        return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name,
                             infer_outputs=[o], use_binary_outputs=payload.use_binary_outputs,
                             requested_outputs=wanted or None)

if __name__ == "__main__":
    ModelServer(workers=1).start([Tile()])
