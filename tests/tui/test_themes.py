"""Themes: the four built-ins carry every spec colour; the colour-blind one
keeps accepted and rejected apart without red/green; user TOML themes."""

from __future__ import annotations

import colorsys
import os

import pytest
from textual.color import Color

from specchat.themes import (
    BUILTIN,
    COLORBLIND,
    HIGH_CONTRAST,
    MAX_THEME_BYTES,
    SPEC_VARIABLES,
    load_user_themes,
    theme_from_toml,
)


def hue(colour: str) -> float:
    r, g, b = Color.parse(colour).rgb
    return colorsys.rgb_to_hsv(r / 255, g / 255, b / 255)[0] * 360


def test_four_builtins_with_every_spec_variable():
    assert [t.name for t in BUILTIN] == ["specchat-dark", "specchat-light", "specchat-colorblind",
                                          "specchat-high-contrast"]
    for theme in BUILTIN:
        assert set(SPEC_VARIABLES) <= set(theme.variables), theme.name
        v = theme.variables
        assert v["spec-accepted"] != v["spec-rejected"]
        assert v["spec-ngram"] != v["spec-model"]


def test_colorblind_uses_blue_and_orange_not_red_green():
    v = COLORBLIND.variables
    for name in ("spec-accepted", "spec-good", "spec-ngram"):
        assert 180 <= hue(v[name]) <= 260, name  # blue
    for name in ("spec-rejected", "spec-bad"):
        assert 20 <= hue(v[name]) <= 50, name  # orange
    for colour in v.values():
        h = hue(colour)
        assert not (90 <= h <= 150) and not (h < 15 or h > 345), colour  # no green, no red


def test_high_contrast_is_extreme():
    assert HIGH_CONTRAST.background == "#000000" and HIGH_CONTRAST.foreground == "#ffffff"
    for name in ("spec-accepted", "spec-rejected"):
        assert Color.parse(HIGH_CONTRAST.variables[name]).brightness > 0.4


def test_user_theme_from_toml(tmp_path):
    (tmp_path / "mine.toml").write_text('primary = "#123456"\ndark = false\n[variables]\nspec-accepted = "#00aaff"\n')
    (tmp_path / "broken.toml").write_text('primary = \n')
    (tmp_path / "odd.toml").write_text('primary = "#111111"\ncolour = "x"\n')
    themes, errors = load_user_themes(tmp_path)
    assert [t.name for t in themes] == ["mine"]
    assert themes[0].variables["spec-accepted"] == "#00aaff"
    assert themes[0].variables["spec-rejected"]  # filled from the defaults
    assert themes[0].dark is False
    assert len(errors) == 2 and "broken.toml" in errors[0] and "unknown key 'colour'" in errors[1]


def test_user_themes_folder_with_a_fifo_a_huge_file_a_folder_and_links(tmp_path):
    """The chat reads this folder before its first screen: nothing planted in
    it may hang the start or read a huge file, and a link to a theme is one."""
    good = 'primary = "#123456"\n'
    os.mkfifo(tmp_path / "pipe.toml")  # a read would wait for a writer forever
    (tmp_path / "huge.toml").write_text(good + "# " + "x" * MAX_THEME_BYTES + "\n")
    (tmp_path / "folder.toml").mkdir()
    kept = tmp_path.parent / "kept-theme.toml"
    kept.write_text(good)
    (tmp_path / "linked.toml").symlink_to(kept)
    (tmp_path / "dangling.toml").symlink_to(tmp_path / "gone.toml")
    themes, errors = load_user_themes(tmp_path)
    assert [t.name for t in themes] == ["linked"]
    by_file = {e.split(": ", 1)[0].rsplit("/", 1)[1]: e for e in errors}
    assert set(by_file) == {"dangling.toml", "folder.toml", "huge.toml", "pipe.toml"}
    assert "not a regular file" in by_file["pipe.toml"] and "not a regular file" in by_file["folder.toml"]
    assert "too big for a theme" in by_file["huge.toml"]
    assert "No such file" in by_file["dangling.toml"]
    assert all(e.endswith("; not loaded") and "\n" not in e for e in errors)


def test_a_user_theme_never_takes_the_name_of_a_built_in_or_of_another(tmp_path):
    (tmp_path / "a.toml").write_text(f'name = "{BUILTIN[0].name}"\nprimary = "#ff00ff"\n')
    (tmp_path / "b.toml").write_text('name = "Dup"\nprimary = "#111111"\n')
    (tmp_path / "c.toml").write_text('name = "Dup"\nprimary = "#222222"\n')
    themes, errors = load_user_themes(tmp_path)
    assert [(t.name, t.primary) for t in themes] == [("Dup", "#111111")]
    assert errors == [
        f"theme {tmp_path / 'a.toml'}: the name '{BUILTIN[0].name}' is taken by a built-in theme; not loaded",
        f"theme {tmp_path / 'c.toml'}: the name 'Dup' is taken by a theme loaded before it; not loaded",
    ]


def test_theme_needs_primary():
    with pytest.raises(ValueError, match="primary"):
        theme_from_toml('name = "x"\n', "x")


async def test_app_registers_user_themes(tmp_path, monkeypatch):
    from tests.support.tui import make_app, ready, user_themes

    user_themes(tmp_path, monkeypatch, ocean='primary = "#0088cc"\n[variables]\nspec-accepted = "#00aaff"\n')
    from specchat.config import Settings

    app = make_app(tmp_path, settings=Settings(theme="ocean"))
    async with app.run_test() as pilot:
        await ready(pilot)
        assert app.theme == "ocean"
        assert app.theme_variables["spec-accepted"] == "#00aaff"
        app.theme = "specchat-colorblind"
        await pilot.pause()
        assert app.theme_variables["spec-rejected"] == "#e69f00"


async def test_the_palette_offers_specchats_themes_and_the_users_only(tmp_path, monkeypatch):
    """Textual's own themes are not offered (some leave the prompt unreadable);
    a setting that names one says so in one line and opens on the default,
    and a user theme named like one of Textual's is the user's."""
    from specchat.config import Settings
    from tests.support.tui import make_app, notices, ready, user_themes

    user_themes(tmp_path, monkeypatch, nord='primary = "#5e81ac"\n')
    app = make_app(tmp_path, settings=Settings(theme="gruvbox"))
    async with app.run_test() as pilot:
        await ready(pilot)
        assert sorted(app.available_themes) == sorted([t.name for t in BUILTIN] + ["nord"])
        assert app.available_themes["nord"].primary == "#5e81ac"
        assert app.theme == "specchat-dark"
        assert "unknown theme 'gruvbox'; using specchat-dark" in notices(app)
