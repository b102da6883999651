"""Host side of natswitch: compressors, switch-compatible codecs, models and training."""
