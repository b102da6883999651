"""Gradient compressors: one operator per class, wire cost stated per operator.

Use registry.parse("topk:0.01") for a factory, modes.ModelCompressor for
layer-wise or entire-model application, feedback.ErrorFeedback for memory.
"""
