"""What the panel's browser tests measure on the page: computed contrast, the theme, geometry.

Colours are read as the browser computed them (``getComputedStyle``), normalised by drawing
them on a canvas over white and over black (so any CSS colour syntax, ``color-mix()`` included,
comes out as sRGB with its alpha), and composited over every translucent background up to the
first opaque one, as the eye sees it. Contrast is WCAG 2's ratio of relative luminances.
"""

from __future__ import annotations

from typing import Any

from browser_driver import App

COLOUR_JS = r"""
() => {
  if (window.__nbrColour) { return true; }
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const over = (css, base) => {
    ctx.globalCompositeOperation = 'copy';
    ctx.fillStyle = base; ctx.fillRect(0, 0, 1, 1);
    ctx.globalCompositeOperation = 'source-over';
    ctx.fillStyle = css; ctx.fillRect(0, 0, 1, 1);
    return ctx.getImageData(0, 0, 1, 1).data;
  };
  // [r, g, b, a] in 0..255 / 0..1, from any CSS colour
  const rgba = css => {
    if (!css || css === 'transparent') { return [0, 0, 0, 0]; }
    const w = over(css, '#fff'), b = over(css, '#000');
    const a = 1 - (w[0] - b[0]) / 255;
    if (a <= 0.002) { return [0, 0, 0, 0]; }
    return [b[0] / a, b[1] / a, b[2] / a, Math.min(1, a)];
  };
  const blend = (top, bottom) => {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]);
  };
  // the opaque colour behind an element: its and its ancestors' backgrounds, composited
  const background = el => {
    const layers = [];
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const c = rgba(getComputedStyle(node).backgroundColor);
      if (c[3] > 0) { layers.push(c); }
      if (c[3] >= 0.999) { break; }
    }
    let colour = [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) { colour = blend(layers[i], colour); }
    return colour;
  };
  const lum = c => {
    const f = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const ratio = (a, b) => {
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const textContrast = el => {
    const bg = background(el);
    const fg = blend(rgba(getComputedStyle(el).color), bg);
    return ratio(fg, bg);
  };
  window.__nbrColour = { rgba, background, ratio, textContrast, blend };
  return true;
}
"""

# Every piece of text in the diffs (each text node's parent element), with its contrast.
DIFF_CONTRAST_JS = r"""
(root) => {
  const out = [];
  for (const code of root.querySelectorAll('.nbr-code')) {
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) { continue; }
      const el = node.parentElement;
      if (!el.getClientRects().length) { continue; }
      out.push({ text: node.textContent.slice(0, 40), cls: el.className,
                 row: el.closest('.nbr-line') ? el.closest('.nbr-line').className : '',
                 ratio: window.__nbrColour.textContrast(el) });
    }
  }
  return out;
}
"""

FOCUS_RING_JS = r"""
(button) => {
  const style = getComputedStyle(button);
  const behind = window.__nbrColour.background(button.parentElement);
  const ring = window.__nbrColour.blend(window.__nbrColour.rgba(style.outlineColor), behind);
  return { focused: document.activeElement === button, visible: button.matches(':focus-visible'),
           style: style.outlineStyle, width: parseFloat(style.outlineWidth),
           offset: parseFloat(style.outlineOffset), ratio: window.__nbrColour.ratio(ring, behind) };
}
"""


def install(app: App) -> None:
    app.page.evaluate(COLOUR_JS)


def set_theme(app: App, theme: str) -> None:
    """'JupyterLab Light' or 'JupyterLab Dark' (JupyterLab and Notebook 7 share the command)."""
    app.page.evaluate(
        "async (theme) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme}); }",
        theme,
    )
    app.page.wait_for_function("(theme) => document.body.dataset.jpThemeName === theme", arg=theme)
    app.page.wait_for_timeout(300)  # the theme's stylesheet applies


def diff_contrast(app: App, panel: Any) -> list[dict[str, Any]]:
    install(app)
    return list(panel.evaluate(DIFF_CONTRAST_JS))


def focus_ring(app: App, button: Any) -> dict[str, Any]:
    install(app)
    return dict(button.evaluate(FOCUS_RING_JS))


def box(locator: Any) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, "not rendered"
    return dict(found)
