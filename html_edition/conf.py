"""Sphinx settings of the book's static HTML edition (html_edition/build.py stages the sources
and calls Sphinx with this folder as its configuration folder)."""

project = "딥러닝과 CUDA"
author = "딥러닝과 CUDA 저자들"
language = "ko"
extensions = ["myst_nb"]

# The notebooks are shown with the outputs stored in them; nothing runs.
nb_execution_mode = "off"
nb_ipywidgets_js = {}  # widgets arrive as their saved pictures (build.py); no widget manager from a CDN
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_update_mathjax = False

# MathJax 2.7 from the site itself (build.py copies it from jupyter-server-mathjax).
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
mathjax2_config = {
    "tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]], "processEscapes": True},
    "messageStyle": "none",
    # the package carries the STIX-Web fonts only (no TeX fonts, no image fonts)
    "HTML-CSS": {"availableFonts": [], "webFont": "STIX-Web", "preferredFont": None, "imageFont": None},
}

html_theme = "sphinx_book_theme"
html_title = "딥러닝과 CUDA"
html_static_path = ["static"]  # build.py adds the staged MathJax and Korean font (-D html_static_path=...)
html_css_files = ["fonts.css", "book.css"]
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
    "footer_content_items": [],  # the theme's "By <author>" reads badly in its Korean translation
}
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
exclude_patterns = ["**.ipynb_checkpoints"]
