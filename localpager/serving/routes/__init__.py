"""The server's routes, one ``APIRouter`` per concern: ``chat`` (the OpenAI API), ``conversations`` (the
memory endpoints) and ``inspector`` (the page, its files and ``/health``). Each handler reaches its app's
``LocalPager`` through ``state.ServedDep``, so a router holds no state and serves any app that includes it."""
