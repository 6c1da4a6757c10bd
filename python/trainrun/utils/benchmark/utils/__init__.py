"""The parts of trainrun.utils.benchmark: common (TaskSpec, Measurement), timer (Timer), compare (Compare)."""
