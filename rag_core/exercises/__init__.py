"""Exercises that make it stick: predict a number, a choice or a reason, then see the engine's own
figure, computed live on the stack and index in use (sheets, figures, grading)."""
