"""An id one can copy: a read-only field (selectable without script) and a Copy button that the
viewer's script shows and wires to the clipboard (it stays hidden without script)."""

from __future__ import annotations

from ledger.areas.viewer.markup import Html, html


def copy_field(value: str, label: str) -> Html:
    return html(
        '<span class="copy-id"><input type="text" class="id-field" readonly value="{v}"'
        ' aria-label="{label}" size="{size}" spellcheck="false"><button type="button"'
        ' class="copy" data-copy="{v}" aria-label="Copy {label}" hidden>Copy</button>'
        '<span class="copied" role="status" aria-live="polite"></span></span>',
        v=value,
        label=label,
        size=max(8, min(len(value), 48)),
    )
