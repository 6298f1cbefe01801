// Small inline SVG icons (16 px grid, stroked with currentColor), built with the DOM:
// no icon font, no image request, nothing from elsewhere.

const SVG = "http://www.w3.org/2000/svg";

const PATHS = {
  // a pull/merge request: two nodes and an arrowed path
  review: ["M5 3.5a1.5 1.5 0 1 1-3 0 1.5 1.5 0 0 1 3 0Z", "M3.5 5v6", "M5 12.5a1.5 1.5 0 1 1-3 0 1.5 1.5 0 0 1 3 0Z",
    "M14 12.5a1.5 1.5 0 1 1-3 0 1.5 1.5 0 0 1 3 0Z", "M12.5 11V6.5a2 2 0 0 0-2-2H8", "M9.5 3 8 4.5 9.5 6"],
  // a commit: a ring on a line
  commit: ["M10.5 8a2.5 2.5 0 1 1-5 0 2.5 2.5 0 0 1 5 0Z", "M1 8h4.5", "M10.5 8H15"],
  // a branch: a trunk and a forked limb
  branch: ["M4.5 2.5v11", "M13 4a1.5 1.5 0 1 1-3 0 1.5 1.5 0 0 1 3 0Z", "M11.5 5.5c0 4-7 3-7 6.5"],
  // a run: a play mark in a circle
  run: ["M14.5 8a6.5 6.5 0 1 1-13 0 6.5 6.5 0 0 1 13 0Z", "M6.5 5.5v5l4-2.5-4-2.5Z"],
  external: ["M9 2.5h4.5V7", "M13.5 2.5 7.5 8.5", "M11.5 9.5v3a1 1 0 0 1-1 1h-7a1 1 0 0 1-1-1v-7a1 1 0 0 1 1-1h3"],
  close: ["M3.5 3.5l9 9", "M12.5 3.5l-9 9"],
  clock: ["M14.5 8a6.5 6.5 0 1 1-13 0 6.5 6.5 0 0 1 13 0Z", "M8 4.5V8l2.5 1.5"],
};

export const EVIDENCE_LABEL = { review: "review", commit: "commit", branch: "branch", run: "run" };
export const EVIDENCE_PLURAL = { review: "reviews", commit: "commits", branch: "branches", run: "runs" };

export function icon(name, label = "") {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "14");
  svg.setAttribute("height", "14");
  svg.setAttribute("fill", "none");
  svg.setAttribute("stroke", "currentColor");
  svg.setAttribute("stroke-width", "1.5");
  svg.setAttribute("stroke-linecap", "round");
  svg.setAttribute("stroke-linejoin", "round");
  svg.setAttribute("class", `icon icon-${name}`);
  if (label) {
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", label);
  } else {
    svg.setAttribute("aria-hidden", "true");
  }
  for (const d of PATHS[name] || PATHS.commit) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

export function svgNode(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, String(value));
  }
  return node;
}
