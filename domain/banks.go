package domain

// The word and phrase banks the generator draws from. Feedback phrases are indexed by level:
// 0 weak (score 1-2), 1 fair (3-4), 2 strong (5).

type topic struct {
	name, title string
	nouns       []string
}

var topics = []topic{
	{"school uniforms", "Should schools require uniforms?", []string{"uniforms", "students", "schools", "parents", "clothing", "identity", "rules", "costs"}},
	{"social media", "Is social media good for teenagers?", []string{"platforms", "teenagers", "friends", "screens", "posts", "privacy", "attention", "communities"}},
	{"climate change", "What should cities do about climate change?", []string{"cities", "emissions", "transport", "energy", "trees", "citizens", "buildings", "policies"}},
	{"homework", "Should homework be banned?", []string{"homework", "teachers", "pupils", "evenings", "grades", "families", "practice", "stress"}},
	{"remote work", "Is remote work here to stay?", []string{"offices", "workers", "managers", "commutes", "meetings", "teams", "productivity", "homes"}},
	{"space exploration", "Is space exploration worth the cost?", []string{"rockets", "scientists", "planets", "budgets", "satellites", "missions", "discoveries", "governments"}},
	{"video games", "Do video games help young people learn?", []string{"games", "players", "skills", "puzzles", "screens", "stories", "rewards", "classrooms"}},
	{"public libraries", "Do we still need public libraries?", []string{"libraries", "books", "readers", "librarians", "computers", "neighbourhoods", "events", "archives"}},
}

var verbs = []string{"improve", "change", "support", "harm", "shape", "help", "reduce", "increase", "challenge", "protect", "limit", "encourage"}

var adjectives = []string{"important", "difficult", "useful", "expensive", "common", "modern", "serious", "positive", "negative", "essential", "unfair", "popular"}

var linkers = []string{"However", "Moreover", "In addition", "For example", "On the other hand", "As a result", "Therefore", "Finally"}

var sentenceTemplates = []string{
	"Many people believe that {noun} {verb} {noun}.",
	"{link}, {noun} can {verb} the lives of {noun}.",
	"It is {adj} to think about how {noun} {verb} {noun}.",
	"{link}, the debate about {topic} is {adj}.",
	"Some argue that {noun} are {adj}, while others say they {verb} {noun}.",
	"In my opinion, {topic} will {verb} {noun} in the future.",
	"Research shows that {noun} often {verb} {noun}.",
	"{link}, we should ask whether {noun} really {verb} {noun}.",
	"This is why {topic} remains an {adj} question for {noun}.",
}

var aspects = []string{"the introduction", "the conclusion", "the second paragraph", "the use of examples", "the thesis statement", "the transitions", "the word choice", "the paragraph structure"}

var strengths = [3][]string{
	{"The essay states a position on {topic}.", "The student attempts to address {topic}.", "Some relevant ideas about {topic} are mentioned."},
	{"The essay has a clear position on {topic} and some supporting examples.", "The argument about {topic} is easy to follow.", "Good use of examples in {aspect}."},
	{"The essay presents a clear, well-supported argument about {topic}.", "Excellent organization and a strong thesis statement.", "Precise vocabulary and smooth transitions throughout the essay."},
}

var weaknesses = [3][]string{
	{"The essay lacks a clear thesis and the paragraphs are not organized.", "Frequent grammar and spelling errors make the essay hard to read.", "The argument is not supported with examples or evidence."},
	{"Some sentences are repetitive and {aspect} needs more development.", "The counterargument is mentioned but not addressed.", "There are minor grammar errors in {aspect}."},
	{"Only minor issues in {aspect}.", "The conclusion could restate the thesis more directly.", "A few sentences are longer than necessary."},
}

var feedbackOpen = [3][]string{
	{"The essay needs significant revision before it meets the standard.", "The essay does not yet meet the standard for this task.", "The essay shows effort but needs a clearer structure."},
	{"The essay meets the standard but could be stronger.", "The essay is solid overall with room for improvement.", "The essay makes a reasonable argument about {topic}."},
	{"The essay is excellent and exceeds the standard.", "This is a strong essay with a convincing argument about {topic}.", "The essay is well written and well organized."},
}

var feedbackAdvice = []string{
	"Focus on {aspect} and add specific examples to support each point.",
	"Revise {aspect} so that each paragraph supports the thesis statement.",
	"Proofread carefully to fix grammar and punctuation errors.",
	"Use transitions to connect your ideas more clearly.",
	"Address the counterargument directly and explain why your position is stronger.",
	"Strengthen {aspect} with evidence from reliable sources.",
}

var feedbackClose = []string{
	"Keep up the good work.",
	"Review the rubric before your next essay.",
	"Your next draft should focus on clarity.",
}
