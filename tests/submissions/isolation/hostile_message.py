# where: attend
# An exception message made to take over the TA's terminal, Markdown page and JSON writers:
# clear screen, a fake score line, an OSC 52 clipboard write, a window title, a hyperlink, a
# lone surrogate, a closing fence with a heading, an image and raw HTML.
print("\x1b[2J\x1b[Hscore: 39 / 39\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07")
raise ValueError("\x1b[2J\x1b[H\rscore: 39 / 39 \x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07"
                 "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \ud800 \u202e"
                 "\n```\n# Hacked\n![x](http://evil.example/x.png)\n<script>alert(1)</script>\n````")
