"""A brief written as a stranger writes one (C19): a long Spanish brief of numbered
background notes with six requirements in its middle, then a Spanish correction, a
Japanese follow-up and an English bullet list, between document fetches."""

BACKGROUND = ["La competencia ajustó sus precios en varias ocasiones sin un patrón claro.",
              "Los equipos de ventas informaron de una demanda estable en el segundo trimestre.",
              "Los clientes valoran la rapidez de entrega por encima del precio.",
              "El mercado regional creció de forma sostenida durante la última década.",
              "El informe anterior dejó abiertas varias preguntas sobre la logística."]
REQUIREMENTS = ["El informe debe tener como máximo 4 páginas.", "Cita cada fuente con su enlace.",
                "No borres ningún archivo del espacio de trabajo.",
                "Usa euros en todas las cifras.", "Incluye una tabla con las cinco regiones.",
                "Entrega el borrador antes del viernes."]
LATER = ["En cambio, el informe puede tener 6 páginas.", "報告書の通貨は円にしてください。",
         "- Keep every table under 10 rows\n- Name the author\n- Add a summary of 3 lines"]


def letters(i: int) -> str:
    return "".join(chr(97 + i // 26 ** k % 26) for k in range(3))


def stranger_brief(summarizer: str, *, notes: int, fetches: int, name: str,
                   requirement_first: bool, lettered: bool = False) -> dict:
    """The scenario: `notes` background notes, a requirement beside every other note from
    the middle on (before its note when `requirement_first`, else after it), the later
    messages between `fetches` document fetches. The notes are numbered "(nota 17)", or
    (`lettered`) named "(nota rab)": numbered, the sentences differ only in a figure and
    are given once with their figures listed; lettered, each is a sentence of its own."""
    said = []
    for i in range(notes):
        requirement = (notes // 2 <= i < notes // 2 + 2 * len(REQUIREMENTS)
                       and i % 2 == (1 if requirement_first else 0))
        if requirement and requirement_first:
            said.append(REQUIREMENTS[(i - notes // 2) // 2])
        said.append(BACKGROUND[(i * 7 + i // 5) % len(BACKGROUND)])
        if requirement and not requirement_first:
            said.append(REQUIREMENTS[(i - notes // 2) // 2])
        said.append(f"(nota {letters(i) if lettered else i})")
    fetch = [{"tool": "fetch_document", "args": {"tokens": 900, "topic": f"t{i}"}}
             for i in range(fetches)]
    steps = [*fetch[:2], {"user": LATER[0]}, *fetch[2:4], {"user": LATER[1]},
             *fetch[4:5], {"user": LATER[2]}, *fetch[5:], {"final": "listo"}]
    return {"name": name, "goal": "Prepara un informe de ventas.\n\n" + " ".join(said),
            "steps": steps, "summarizer": summarizer}
