"""What the console commands share about their command lines: a parser that
says what is wrong in one line (exit code 2, as argparse), argument types for
numbers within bounds, refused there with the bound named, and the one line
on stderr for what goes wrong after (exit code 1: EXIT_BAD_DATA)."""
from __future__ import annotations

import argparse
import math
import sys

EXIT_BAD_DATA = 1  # files, or what they hold, that cannot be used (argparse exits with 2 for the command line)
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell counts SIGINT


def say_error(prog: str, error) -> None:
    """`prog: error: <error>` on one line on stderr (line breaks in the message joined)."""
    message = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, MemoryError):
        message = f"out of memory ({message})"
    print(f"{prog}: error: {message}", file=sys.stderr)


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser that says what is wrong on one line (exit code 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def number(low: float = -math.inf, high: float = math.inf, *, integer: bool = False, low_open: bool = False,
           high_open: bool = False):
    """An argparse type: a finite number (an integer with `integer`) within
    [low, high] (either end excluded with low_open, high_open); argparse
    names the option and the value it refuses, this says why."""
    kind = "an integer" if integer else "a finite number"
    bounds = [f"{'>' if low_open else '>='} {low:g}"] if low > -math.inf else []
    bounds += [f"{'<' if high_open else '<='} {high:g}"] if high < math.inf else []
    wanted = kind + (f" {' and '.join(bounds)}" if bounds else "")

    def convert(text: str):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if not (math.isfinite(value) and (low < value if low_open else low <= value)
                and (value < high if high_open else value <= high)):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value

    return convert
