"""Model calls made by a view-only rerun of the app: after a question is answered, visiting every
page and rerunning must not call the generator again (the trace is cached)."""

from common import ROOT, emit

from rag_core.generators.base import ForwardCounter


def main():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=900)
    at.session_state["index_name"] = "wiki"
    at.run()
    before = ForwardCounter.count
    for page in ("token_vs_sequence", "citations", "map", "ask", "ask"):
        at.switch_page(str(ROOT / "pages" / f"{page}.py"))
        at.run()
    emit({"view_only_rerun_model_calls": ForwardCounter.count - before, "first_answer_model_calls": before})


if __name__ == "__main__":
    main()
