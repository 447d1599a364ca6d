"""Triton Python backend model: output = numpy.tile(input, repeats)."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "input").as_numpy()
            reps = pb_utils.get_input_tensor_by_name(request, "repeats").as_numpy()
            out = np.tile(x, reps.reshape(-1).tolist())
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("output", out)]))
        return responses
