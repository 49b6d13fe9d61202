"""The SVG markup every pplan drawing shares: the standalone document (header, white background, footer), elements
with their attributes, text and tooltips escaped. Drawings (`pplan.render.schedule`, `pplan.render.bench`) place
the pieces; this module decides nothing about layout.

Text, tooltips and attribute values are XML-escaped, and any character that is not printable (a newline, an escape
sequence, a bidirectional override, which XML 1.0 cannot hold or a viewer would act on) is first written as its
escape (`\\x1b`, `pplan.profiles.text.escaped`): whatever a name holds, it adds no element, line or control
character to a drawing. Attributes are written in the order given, `font_size=12` as `font-size="12"` (`class_` as `class`), a value of
None left out; numbers are written as given (format floats before passing them), so a drawing's bytes follow
from its data alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from xml.sax.saxutils import escape, quoteattr

from pplan.profiles.text import escaped

SVG_NS = "http://www.w3.org/2000/svg"
FONT_FAMILY = "DejaVu Sans, Helvetica, Arial, sans-serif"
WHITE = "#FFFFFF"

Value = str | int | float | None


def attributes(attrs: dict[str, Value]) -> str:
    """` name="value"` for each attribute that is not None, in order; Python names become SVG names."""
    out = []
    for name, value in attrs.items():
        if value is None:
            continue
        key = name.rstrip("_").replace("_", "-")
        out.append(f" {key}={quoteattr(escaped(str(value), markup=False))}")
    return "".join(out)


def element(tag: str, children: str | None = None, /, **attrs: Value) -> str:
    """One element: self-closing without `children`, else wrapping them (markup, inserted as is)."""
    if children is None:
        return f"<{tag}{attributes(attrs)}/>"
    return f"<{tag}{attributes(attrs)}>{children}</{tag}>"


def title(tooltip: str) -> str:
    """A tooltip (`<title>`) for the element it is put in."""
    return f"<title>{_xml_text(tooltip)}</title>"


def text(x: Value, y: Value, content: str, /, **attrs: Value) -> str:
    """A `<text>` at (x, y) holding `content` (escaped)."""
    return element("text", _xml_text(content), x=x, y=y, **attrs)


def _xml_text(content: str) -> str:
    """`content` as XML character data: unprintable characters written as escapes, then `&`, `<`, `>` escaped."""
    return escape(escaped(content, markup=False))


def rect(
    x: Value, y: Value, width: Value, height: Value, /, tooltip: str | None = None, **attrs: Value
) -> str:
    """A rectangle; `attrs` may set `class_` (put first) and the paint."""
    cls = attrs.pop("class_", None)
    return element(
        "rect",
        None if tooltip is None else title(tooltip),
        class_=cls,
        x=x,
        y=y,
        width=width,
        height=height,
        **attrs,
    )


def line(x1: Value, y1: Value, x2: Value, y2: Value, /, **attrs: Value) -> str:
    """A straight line (give it a `stroke`)."""
    return element("line", x1=x1, y1=y1, x2=x2, y2=y2, **attrs)


def open_svg(width: int, height: int, y: int | None = None, font: bool = True) -> str:
    """The `<svg>` start tag of a drawing `width` × `height` (placed at `y` when nested in another)."""
    return (
        f'<svg{attributes({"y": y})} xmlns={quoteattr(SVG_NS)} width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"' + (f" font-family={quoteattr(FONT_FAMILY)}" if font else "") + ">"
    )


def background(width: int, height: int) -> str:
    """A white rectangle under the whole drawing."""
    return rect(0, 0, width, height, class_="background", fill=WHITE)


def document(start: str, parts: Iterable[str]) -> str:
    """A whole SVG file: the start tag, one part per line, the end tag and a final newline."""
    return "\n".join([start, *parts, "</svg>"]) + "\n"
