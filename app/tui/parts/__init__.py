"""The chat screen's parts: each holds a group of keys and the dialogs they
open (branches, copying, files and write-back, the settings commands, the
modal screens), and sees the screen only through view.py's `ChatView`."""
