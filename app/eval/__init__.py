"""The Eval page's parts: the views below the summary, the reliability diagram, two runs compared, the
before-and-after of training."""
