"""MLServer runtime serving tile: output = numpy.tile(input, repeats)."""
import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class TileModel(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        ins = {i.name: NumpyCodec.decode_input(i) for i in payload.inputs}
        out = np.tile(ins["input"], ins["repeats"].reshape(-1).tolist())
        return InferenceResponse(model_name=self.name, id=payload.id,
                                 outputs=[NumpyCodec.encode_output("output", out)])
