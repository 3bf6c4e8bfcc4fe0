"""Incremental rendering: per-layer caches and dirty rectangles.

Layers, bottom to top: the background (wallpaper + icons), each visible window (its own image,
so a window never draws outside its rect), and the taskbar (button strip + clock box). A window
that changed is re-rendered into its own image; a moved, raised, opened or closed window dirties
its old and new rects; the clock dirties only its box. Each dirty rect of the persistent frame is
then re-composited from the layer arrays with numpy slice copies. :meth:`Compositor.render_full`
renders everything from scratch with a fresh text cache, to check the incremental path.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.render import Painter, Rect, TextRenderer, intersect, union
from cua_rl.envs.backends.simdesk.windows import Window

__all__ = ["Compositor"]


def _wallpaper(desk: Desktop) -> np.ndarray:
    t = desk.theme
    ramp = np.linspace(0.0, 1.0, desk.height, dtype=np.float32)[:, None, None]
    top = np.array(t.wallpaper_top, np.float32)
    bottom = np.array(t.wallpaper_bottom, np.float32)
    col = (top * (1 - ramp) + bottom * ramp).astype(np.uint8)
    return np.ascontiguousarray(np.broadcast_to(col, (desk.height, desk.width, 3)))


class Compositor:
    """Keeps the frame of one desktop up to date by repainting only what changed.

    Args:
        desk: The desktop to draw.
        textr: Text renderer (defaults to the desktop's cached one).
        walls: A cache of wallpapers by theme name, shared between resets.
    """

    def __init__(
        self, desk: Desktop, textr: TextRenderer | None = None,
        walls: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.desk = desk
        self.textr = textr or desk.textr
        self.frame = np.zeros((desk.height, desk.width, 3), np.uint8)
        walls = {} if walls is None else walls
        if desk.theme.name not in walls:
            walls[desk.theme.name] = _wallpaper(desk)
        self._wall = walls[desk.theme.name]
        self._bg: np.ndarray | None = None
        self._bg_key: object = None
        self._wins: dict[int, tuple[np.ndarray, bool]] = {}
        self._prev: dict[int, tuple[int, Rect]] = {}
        self._tb: np.ndarray | None = None
        self._tb_key: object = None
        self._clock_key: object = None

    def _painter(self, img: Image.Image) -> Painter:
        return Painter(img, self.textr, self.desk.theme, self.desk.m)

    # -- layer renderers ---------------------------------------------------------------------
    def _render_bg(self) -> np.ndarray:
        desk, m = self.desk, self.desk.m
        img = Image.fromarray(self._wall)
        p = self._painter(img)
        for icon in desk.icons:
            if icon.selected:
                p.draw.rectangle(
                    (icon.rect[0], icon.rect[1], icon.rect[0] + icon.rect[2] - 1,
                     icon.rect[1] + icon.rect[3] - 1), outline=(255, 255, 255)
                )
            x, y, w, h = desk.icon_image_rect(icon)
            p.draw.rounded_rectangle((x, y, x + w - 1, y + h - 1), radius=max(3, w // 6),
                                     fill=icon.spec.color, outline=(255, 255, 255))
            p.text_in((x, y, w, h), icon.spec.glyph, (255, 255, 255), size=max(10, h // 2))
            lr = (icon.rect[0], y + h + 2, icon.rect[2], m.line_h)
            p.text_in(lr, icon.spec.label, (255, 255, 255))
        return np.asarray(img)

    def _render_window(self, w: Window, active: bool) -> np.ndarray:
        # Layer images are only read (composited from), so Pillow's read-only array view is
        # enough; the taskbar layer is written into (the clock) and keeps its own copy.
        return np.asarray(w.render_image(self._painter, active))

    def _render_taskbar(self) -> np.ndarray:
        desk, m, t = self.desk, self.desk.m, self.desk.theme
        x0, y0, tw, th = desk.taskbar_rect
        img = Image.new("RGB", (tw, th), t.taskbar)
        p = self._painter(img)
        p.rect((0, 0, m.tx(92), th), t.accent)
        p.text_in((0, 0, m.tx(92), th), "SimDesk", t.accent_text)
        for w, r in desk.taskbar_buttons():
            lr = (r[0] - x0, r[1] - y0, r[2], r[3])
            active = w is desk.wm.active_root()
            p.rect(lr, t.title_active if active else (60, 64, 72) if not w.minimized
                   else t.taskbar, t.taskbar_text if active else None)
            p.text_in(lr, w.title, t.taskbar_text, size=m.small, align="left")
        return np.asarray(img).copy()

    def _render_clock(self) -> np.ndarray:
        # Drawn as "HH:MM:" + "SS" so that both parts hit the text cache most of the time.
        desk, t, size = self.desk, self.desk.theme, self.desk.m.font
        _, _, w, h = desk.clock_rect()
        img = Image.new("RGB", (w, h), t.taskbar)
        text = desk.clock_text()
        head, tail = text[:6], text[6:]
        hw = self.textr.width(head, size)
        x = (w - hw - self.textr.width("00", size)) // 2
        y = (h - size) // 2 - 1
        self.textr.draw(img, x, y, head, size, t.taskbar_text)
        self.textr.draw(img, x + hw, y, tail, size, t.taskbar_text)
        return np.asarray(img)

    def _taskbar_key(self) -> object:
        d = self.desk
        root = d.wm.active_root()
        fid = root.wid if root is not None else 0
        return (fid, tuple((w.wid, w.title, w.minimized, r) for w, r in d.taskbar_buttons()))

    # -- composition -------------------------------------------------------------------------
    def _composite(self, r: Rect) -> None:
        desk, f = self.desk, self.frame
        x, y, w, h = r
        assert self._bg is not None and self._tb is not None
        f[y: y + h, x: x + w] = self._bg[y: y + h, x: x + w]
        for win in desk.wm.visible():
            i = intersect(r, win.rect)
            if i is None:
                continue
            img = self._wins[win.wid][0]
            ix, iy, iw, ih = i
            lx, ly = ix - win.x, iy - win.y
            f[iy: iy + ih, ix: ix + iw] = img[ly: ly + ih, lx: lx + iw]
        tb = desk.taskbar_rect
        i = intersect(r, tb)
        if i is not None:
            ix, iy, iw, ih = i
            f[iy: iy + ih, ix: ix + iw] = self._tb[iy - tb[1]: iy - tb[1] + ih, ix: ix + iw]

    def render(self) -> np.ndarray:
        """Bring the frame up to date and return it (the caller must copy before handing out)."""
        desk = self.desk
        screen = (0, 0, desk.width, desk.height)
        dirty: list[Rect] = []
        bg_key = (desk.icons_version,)
        if bg_key != self._bg_key:
            self._bg, self._bg_key = self._render_bg(), bg_key
            dirty.append(screen)
        visible = desk.wm.visible()
        cur: dict[int, tuple[int, Rect]] = {}
        for i, w in enumerate(visible):
            active = w is desk.wm.focused
            cached = self._wins.get(w.wid)
            stale = cached is None or cached[1] != active or cached[0].shape[:2] != (w.h, w.w)
            if w.dirty or stale:
                self._wins[w.wid] = (self._render_window(w, active), active)
                w.dirty = False
                dirty.append(w.rect)
            cur[w.wid] = (i, w.rect)
        if cur != self._prev:
            for wid in set(cur) | set(self._prev):
                old, new = self._prev.get(wid), cur.get(wid)
                if old != new:
                    dirty.extend(v[1] for v in (old, new) if v is not None)
            for wid in set(self._wins) - set(cur):
                if not any(w.wid == wid for w in desk.wm.windows):
                    del self._wins[wid]
            self._prev = cur
        tb_key = self._taskbar_key()
        clock_key = desk.clock_text() if desk.config.clock else None
        if tb_key != self._tb_key or self._tb is None:
            self._tb, self._tb_key, self._clock_key = self._render_taskbar(), tb_key, None
            dirty.append(desk.taskbar_rect)
        if clock_key != self._clock_key and self._tb is not None:
            self._clock_key = clock_key
            cr = desk.clock_rect()
            if cr[2] > 0:
                self._tb[:, cr[0]: cr[0] + cr[2]] = self._render_clock()
                dirty.append(cr)
        desk.wm.changed = False
        if len(dirty) > 6:
            u = dirty[0]
            for r in dirty[1:]:
                u = union(u, r)
            dirty = [u]
        for r in dirty:
            c = intersect(r, screen)
            if c is not None:
                self._composite(c)
        return self.frame

    def render_full(self) -> np.ndarray:
        """Render the current state from scratch (fresh caches) and return a new array."""
        fresh = Compositor(self.desk, TextRenderer())
        saved = {w.wid: w.dirty for w in self.desk.wm.windows}
        try:
            return fresh.render().copy()
        finally:
            for w in self.desk.wm.windows:
                w.dirty = saved.get(w.wid, True)
