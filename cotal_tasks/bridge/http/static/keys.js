// Keyboard use of the dashboard: arrow keys between cards, and a detail panel that holds the
// focus while it is open (the page behind it inert, Tab kept inside).

// Arrow keys move between cards: up and down in a column, left and right across columns.
export function moveFocus(event) {
  const here = document.activeElement.closest("article.card");
  const column = here.closest(".column");
  const cards = (box) => [...box.querySelectorAll("article.card a.open")];
  let target = null;
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    const list = cards(column);
    target = list[list.indexOf(document.activeElement) + (event.key === "ArrowDown" ? 1 : -1)];
  } else {
    const columns = [...document.querySelectorAll("#board .column:not([hidden])")].filter((c) => cards(c).length);
    const next = columns[columns.indexOf(column) + (event.key === "ArrowRight" ? 1 : -1)];
    if (next) target = cards(next)[0];
  }
  if (target) {
    event.preventDefault();
    target.focus();
  }
}

export function trapFocus(event) {
  const panel = document.getElementById("detail");
  const focusable = [...panel.querySelectorAll("a[href], button, [tabindex='0'], summary")];
  if (!focusable.length) return;
  const first = focusable[0];
  const last = focusable[focusable.length - 1];
  if (!panel.contains(document.activeElement)) {
    event.preventDefault();
    first.focus();
  } else if (event.shiftKey && document.activeElement === first) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && document.activeElement === last) {
    event.preventDefault();
    first.focus();
  }
}

// While the detail is open, the page behind it takes no focus and no pointer.
export function setInert(on) {
  for (const node of document.querySelectorAll("header.top, main, footer, .skip")) node.inert = on;
}
