"""The web console: a browser front end over the public API, served by ``sift serve``.

``console.routes.install_console`` adds it to the app. This package imports nothing itself:
render workers unpickle ``console.markdown.render_markdown`` and must not pay for the web
stack's imports.
"""
