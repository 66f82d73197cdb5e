"""The stylesheet's colours pass WCAG AA: 4.5:1 for text on the backgrounds it is shown on,
3:1 for bars, borders of tags and the focus ring against white (non-text contrast)."""

from __future__ import annotations

import re

import pytest

from ledger.areas.viewer.assets import CSS


def _variables() -> dict[str, str]:
    return dict(re.findall(r"--([a-z]+):(#[0-9a-f]{6})", CSS))


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_formula_matches_known_pairs() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)


TEXT = ["fg", "muted", "link", "failed", "truncated", "pending"]
BACKGROUNDS = ["bg", "panel"]


@pytest.mark.parametrize("name", TEXT)
@pytest.mark.parametrize("background", BACKGROUNDS)
def test_text_colours_pass_aa(name: str, background: str) -> None:
    colours = _variables()
    assert contrast(colours[name], colours[background]) >= 4.5


@pytest.mark.parametrize("name", ["call", "tool", "failed", "truncated", "focus"])
def test_bars_and_focus_pass_non_text_contrast(name: str) -> None:
    assert contrast(_variables()[name], "#ffffff") >= 3.0


@pytest.mark.parametrize(
    ("fg", "bg"),
    [
        ("#ffffff", "#1b2430"),  # the header's links
        ("#1e6b3a", "#ffffff"),  # .ok
        ("#1a1a1a", "#eef3fb"),  # text of a hovered row
        ("#b3261e", "#fdf1f0"),  # a finding's border on its background
        ("#7a1f9c", "#f7f7f9"),  # JSON keys
        ("#1d6b1d", "#f7f7f9"),  # JSON strings
        ("#0b4f9c", "#f7f7f9"),  # JSON numbers
        ("#8a3b00", "#f7f7f9"),  # JSON literals
    ],
)
def test_fixed_colours_pass_aa(fg: str, bg: str) -> None:
    assert fg in CSS and bg in CSS
    assert contrast(fg, bg) >= 4.5
