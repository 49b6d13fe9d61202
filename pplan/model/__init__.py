"""The transformer itself, independent of how it is cut: parameters, FLOPs per pass and the activations one
micro-batch saves, per layer and at the ends, each as an itemised sum."""
