package sessionitem

import (
	"strings"
	"unicode"
)

// flatten rewrites a condition rendered by the SDK's expression builder with
// as few parentheses as precedence allows (NOT over AND over OR). The
// builder wraps every operand: a chain of four conditions comes out nested
// five deep, and dynalite, the local engine every test and benchmark runs
// on, parses each expression with a backtracking parser whose cost grows
// with the nesting: measured 6.75 ms per conditional UpdateItem nested
// against 1.34 ms flat, which made the engine, not the code under test, the
// bottleneck. The meaning is unchanged; an expression it cannot parse is
// returned as it was.
func flatten(expr string) string {
	p := &condParser{toks: tokenize(expr)}
	n, ok := p.or()
	if !ok || p.i != len(p.toks) {
		return expr
	}
	return n.render(0)
}

// flattened is flatten for an expression the builder may leave unset.
func flattened(expr *string) *string {
	if expr == nil {
		return nil
	}
	f := flatten(*expr)
	return &f
}

// Precedence levels of a rendered node: an operand needs parentheses when
// its level is below its parent's.
const (
	levelOr = iota + 1
	levelAnd
	levelNot
	levelAtom
)

type condNode struct {
	level int
	op    string // "OR", "AND", "NOT", or "" for an atom
	kids  []*condNode
	atom  string
}

func (n *condNode) render(parent int) string {
	var s string
	switch n.op {
	case "":
		s = n.atom
	case "NOT":
		s = "NOT " + n.kids[0].render(levelNot)
	default:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			parts[i] = k.render(n.level)
		}
		s = strings.Join(parts, " "+n.op+" ")
	}
	if n.level < parent {
		return "(" + s + ")"
	}
	return s
}

type condParser struct {
	toks []string
	i    int
}

func (p *condParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *condParser) next() string { t := p.peek(); p.i++; return t }

// or and and build n-ary nodes, merging a child of the same operator (both
// are associative).
func (p *condParser) or() (*condNode, bool) { return p.chain("OR", levelOr, p.and) }

func (p *condParser) and() (*condNode, bool) { return p.chain("AND", levelAnd, p.not) }

func (p *condParser) chain(op string, level int, sub func() (*condNode, bool)) (*condNode, bool) {
	first, ok := sub()
	if !ok {
		return nil, false
	}
	n := &condNode{level: level, op: op}
	add := func(k *condNode) {
		if k.op == op {
			n.kids = append(n.kids, k.kids...)
		} else {
			n.kids = append(n.kids, k)
		}
	}
	add(first)
	for strings.EqualFold(p.peek(), op) {
		p.next()
		k, ok := sub()
		if !ok {
			return nil, false
		}
		add(k)
	}
	if len(n.kids) == 1 {
		return n.kids[0], true
	}
	return n, true
}

func (p *condParser) not() (*condNode, bool) {
	if strings.EqualFold(p.peek(), "NOT") {
		p.next()
		k, ok := p.not()
		if !ok {
			return nil, false
		}
		return &condNode{level: levelNot, op: "NOT", kids: []*condNode{k}}, true
	}
	return p.primary()
}

var conditionFuncs = map[string]bool{
	"attribute_exists": true, "attribute_not_exists": true, "attribute_type": true, "begins_with": true, "contains": true,
}

var comparators = map[string]bool{"=": true, "<>": true, "<": true, "<=": true, ">": true, ">=": true}

func (p *condParser) primary() (*condNode, bool) {
	if p.peek() == "(" {
		p.next()
		n, ok := p.or()
		if !ok || p.next() != ")" {
			return nil, false
		}
		return n, true
	}
	if conditionFuncs[strings.ToLower(p.peek())] {
		call, ok := p.call()
		return &condNode{level: levelAtom, atom: call}, ok
	}
	left, ok := p.operand()
	if !ok {
		return nil, false
	}
	switch t := p.next(); {
	case comparators[t]:
		right, ok := p.operand()
		return &condNode{level: levelAtom, atom: left + " " + t + " " + right}, ok
	case strings.EqualFold(t, "BETWEEN"):
		lo, ok1 := p.operand()
		and := p.next()
		hi, ok2 := p.operand()
		return &condNode{level: levelAtom, atom: left + " BETWEEN " + lo + " AND " + hi}, ok1 && ok2 && strings.EqualFold(and, "AND")
	case strings.EqualFold(t, "IN"):
		if p.next() != "(" {
			return nil, false
		}
		var items []string
		for {
			it, ok := p.operand()
			if !ok {
				return nil, false
			}
			items = append(items, it)
			if sep := p.next(); sep == ")" {
				break
			} else if sep != "," {
				return nil, false
			}
		}
		return &condNode{level: levelAtom, atom: left + " IN (" + strings.Join(items, ", ") + ")"}, true
	}
	return nil, false
}

// operand is a placeholder or path, or size(path).
func (p *condParser) operand() (string, bool) {
	if strings.EqualFold(p.peek(), "size") {
		return p.call()
	}
	t := p.next()
	if t == "" || t == "(" || t == ")" || t == "," || comparators[t] {
		return "", false
	}
	return t, true
}

// call is name(arg, …) with its arguments as operands.
func (p *condParser) call() (string, bool) {
	name := p.next()
	if p.next() != "(" {
		return "", false
	}
	var args []string
	for {
		a, ok := p.operand()
		if !ok {
			return "", false
		}
		args = append(args, a)
		if sep := p.next(); sep == ")" {
			break
		} else if sep != "," {
			return "", false
		}
	}
	return name + "(" + strings.Join(args, ", ") + ")", true
}

// tokenize splits an expression into parentheses, commas, comparators and
// words (names, placeholders, keywords, paths such as #0.#1[2]).
func tokenize(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '(' || c == ')' || c == ',':
			out = append(out, string(c))
			i++
		case c == '<' || c == '>' || c == '=':
			j := i + 1
			if j < len(s) && (s[j] == '=' || (c == '<' && s[j] == '>')) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n(),<>=", rune(s[j])) && !unicode.IsSpace(rune(s[j])) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		}
	}
	return out
}
