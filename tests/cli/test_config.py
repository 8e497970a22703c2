"""Settings: defaults, a good file, bad files named by line, saving keeps comments."""

from __future__ import annotations

from specchat.config import Settings, load_settings, read_settings, save_settings


def test_missing_file_gives_defaults(tmp_path):
    loaded = read_settings(tmp_path / "settings.toml")
    assert loaded.settings == Settings() and loaded.errors == []


def test_reads_every_setting(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('pair = "smollm2-135m"\ndrafter = "draft"\nk = 4\ntemperature = 0.7\ntheme = "specchat-light"\n'
                    'system_prompt = "Be brief."\nthreads = 2\nctx = 2048\n[keymap]\ncycle_drafter = "f9"\n')
    s = load_settings(path)
    assert s == Settings(pair="smollm2-135m", drafter="draft", k=4, temperature=0.7, theme="specchat-light",
                         system_prompt="Be brief.", threads=2, ctx=2048, keymap={"cycle_drafter": "f9"})


def test_env_home_moves_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path))
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "settings.toml").write_text("k = 3\n")
    assert load_settings().k == 3


def test_bad_toml_names_the_line_and_falls_back(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('pair = "x"\nk = 4\ndrafter = ngram\n')
    loaded = read_settings(path)
    assert loaded.settings == Settings()
    assert len(loaded.errors) == 1
    assert str(path) in loaded.errors[0] and "line 3" in loaded.errors[0] and "using the defaults" in loaded.errors[0]


def test_bad_values_name_their_line_and_keep_the_rest(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('# mine\npair = "p"\nk = "eight"\ntemperature = -1\nbogus = 1\n[keymap]\nnew_chat = 5\nlegend = "f11"\n')
    loaded = read_settings(path)
    assert loaded.settings.pair == "p"
    assert loaded.settings.k is None and loaded.settings.temperature == 0.0
    assert loaded.settings.keymap == {"legend": "f11"}  # the rest of the keymap is kept
    lines = {e.split(": ", 1)[0].rsplit(", ", 1)[1]: e for e in loaded.errors}
    assert set(lines) == {"line 3", "line 4", "line 5", "line 7"}
    assert 'keymap.new_chat should be a key string like "ctrl+d", not 5; ignored' in lines["line 7"]
    assert "k should be a whole number, not 'eight'; using each drafter's own" in lines["line 3"]
    assert "unknown setting 'bogus'" in lines["line 5"]


def test_each_keymap_entry_knows_its_own_line(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('memory = true\n\n[keymap]\n# mine\n"memory" = "f11"\nlegend = "f1"\n')
    s = read_settings(path).settings
    assert s.keymap == {"memory": "f11", "legend": "f1"}
    assert s.keymap_where == {"memory": f"{path}, line 5", "legend": f"{path}, line 6"}  # not memory's own line 1
    dotted = tmp_path / "dotted.toml"
    dotted.write_text('k = 4\nkeymap.history = "f12"\n')
    assert read_settings(dotted).settings.keymap_where == {"history": f"{dotted}, line 2"}
    inline = tmp_path / "inline.toml"
    inline.write_text('k = 4\nkeymap = { legend = "f12" }\n')
    assert read_settings(inline).settings.keymap_where == {"legend": f"{inline}, line 2"}


def test_k_out_of_range(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("k = 99\n")
    loaded = read_settings(path)
    assert loaded.settings.k is None and "between 1 and 64" in loaded.errors[0]
    assert "using each drafter's own" in loaded.errors[0]


def test_save_keeps_comments_and_other_keys(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('# my settings\npair = "a"  # the one I like\nk = 4\n')
    save_settings({"theme": "specchat-colorblind", "pair": "b"}, path)
    text = path.read_text()
    assert "# my settings" in text and "# the one I like" in text
    s = load_settings(path)
    assert (s.pair, s.k, s.theme) == ("b", 4, "specchat-colorblind")


def test_save_leaves_a_broken_file_alone(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("k = = 3\n")
    save_settings({"theme": "x"}, path)
    assert path.read_text() == "k = = 3\n"


def test_save_creates_the_file(tmp_path):
    path = tmp_path / "sub" / "settings.toml"
    save_settings({"theme": "specchat-light"}, path)
    assert load_settings(path).theme == "specchat-light"
