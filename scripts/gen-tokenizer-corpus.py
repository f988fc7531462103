#!/usr/bin/env python3
"""gen-tokenizer-corpus.py — writes tests/data/tokenizer/corpus.txt, the text the golden tokenizer
tests encode. All prose below was written for statelm (no third-party text); the rest is generated
deterministically (fixed seed): numbers of every length, source code in several languages, emoji
with ZWJ sequences, skin tones and flags, runs of spaces/tabs/newlines, CRLF and lone CR, combining
marks (decomposed Latin for NFC), contractions, and special-token look-alikes.

Usage: gen-tokenizer-corpus.py OUT_PATH      (standard library only)
"""
import random
import sys

PROSE = {
"latin": [
    "The quick brown fox jumps over the lazy dog while the kettle hums on the stove.",
    "Ça va très bien, merci ! L'été dernier, nous avons visité Besançon et Aix-en-Provence.",
    "Die Straße war naß, aber die Kinder spielten fröhlich im Hof; Grüße aus Köln und Düsseldorf.",
    "El niño comió paella en Málaga y después bebió horchata; ¿quién pagó la cuenta? ¡Nadie!",
    "Em São Paulo, a chuva não parou; as crianças ficaram em casa lendo histórias de piratas.",
    "Łódź, Kraków i Gdańsk to piękne miasta; żółw płynął powoli przez źródło rzeki.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy, zatímco jsme čekali na vlak do Brna.",
    "Árvíztűrő tükörfúrógép — a magyar nyelv kedvenc tesztmondata, ő is ismeri.",
    "Đường phố Hà Nội rất đông đúc vào buổi sáng; tôi uống cà phê sữa đá ở góc phố.",
    "Türkçe öğrenmek zor değil: ğ, ş, ı ve İ harflerine dikkat etmek yeterlidir.",
    "Ærøskøbing ligger på Ærø; på dansk siger man 'rødgrød med fløde' for at drille udlændinge.",
    "Þetta reddast, segja Íslendingar þegar veðrið er slæmt og ferjan er sein.",
    "I can't believe it's already 5 o'clock; we'll leave soon, won't we? They've said they'd come.",
    "DON'T SHOUT, IT'S LATE! She'S here, HE'LL see, we'RE done, you'VE won, I'M tired, they'D go.",
    "Naïve café owners in Zürich rarely serve crème brûlée with a soupçon of cinnamon.",
],
"cyrillic": [
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Москва — столица России; зимой там бывает очень холодно, а летом жарко.",
    "Київ стоїть на Дніпрі, і навесні там цвітуть каштани вздовж Хрещатика.",
    "Българският език използва кирилица; ѝ и ъ се срещат често в текстовете.",
    "Српски се пише и ћирилицом и латиницом: љубав, њива, ђак, џеп, ћерка.",
    "Программист написал функцию, которая считает слова в каждом предложении.",
],
"greek": [
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία — μια πρόταση με όλα τα γράμματα.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας· ο Παρθενώνας στέκει στην Ακρόπολη.",
    "Τα παιδιά έπαιζαν στην παραλία μέχρι που έδυσε ο ήλιος πίσω από τα βουνά.",
    "Ἐν ἀρχῇ ἦν ὁ λόγος — πολυτονικό κείμενο με ψιλές, δασείες και περισπωμένες.",
],
"arabic": [
    "اللغة العربية جميلة جدا، ويتحدث بها أكثر من أربعمائة مليون شخص حول العالم.",
    "ذهبت إلى السوق صباحاً واشتريت خبزاً وتمراً وقهوة عربية بالهيل.",
    "قال المعلم: اقرأوا الدرس الثالث، ثم اكتبوا ملخصاً من خمسة أسطر.",
    "العدد ١٢٣٤٥٦٧٨٩٠ مكتوب بالأرقام الهندية، والعدد 2024 بالأرقام الغربية.",
    "مَرْحَبًا بِكُمْ فِي الدَّرْسِ الْأَوَّلِ مَعَ التَّشْكِيلِ الْكَامِلِ.",
],
"hebrew": [
    "עברית נכתבת מימין לשמאל, והמספרים 123 ו-456 נכתבים משמאל לימין.",
    "הילדים שיחקו בגן הציבורי עד שהשמש שקעה מאחורי ההרים.",
    "שָׁלוֹם עֲלֵיכֶם — טקסט מנוקד עם סימני ניקוד וטעמים.",
],
"devanagari": [
    "हिन्दी भारत की राजभाषाओं में से एक है और इसे देवनागरी लिपि में लिखा जाता है।",
    "मैं कल सुबह बाज़ार गया और वहाँ से ताज़ी सब्ज़ियाँ और फल खरीदे।",
    "संस्कृतम् एका प्राचीना भाषा अस्ति; क्षत्रिय, ज्ञान, श्रृंगार इत्यादयः शब्दाः संयुक्ताक्षरैः युक्ताः।",
    "मराठी भाषेत ळ हे अक्षर वापरले जाते; पुणे आणि मुंबई ही मोठी शहरे आहेत।",
    "संख्याएँ: ०१२३४५६७८९ और 0123456789 दोनों प्रचलित हैं।",
],
"chinese": [
    "我们今天去公园散步，天气非常好，孩子们在草地上放风筝。",
    "编程语言有很多种，例如C语言、Python和Rust，每种都有自己的特点。",
    "中华人民共和国成立于一九四九年，首都是北京。",
    "繁體中文與簡體中文在台灣、香港和中國大陸分別使用。",
    "他说：“这个问题很复杂，我们需要更多的时间来研究。”",
    "人工智能的发展改变了我们的生活方式，也带来了新的挑战。",
],
"japanese": [
    "日本語の文章には、ひらがな、カタカナ、漢字が混ざっています。",
    "東京駅から新幹線に乗って、京都まで約二時間十五分かかります。",
    "コンピューターのプログラムを書くのは楽しいですが、バグを直すのは大変です。",
    "ｶﾀｶﾅの半角文字と全角のＡＢＣ１２３も時々見かけます。",
    "今日は雨が降っているので、傘を持って出かけましょう。",
],
"korean": [
    "한국어는 한글로 쓰며, 한글은 세종대왕이 창제한 문자입니다.",
    "서울의 봄은 짧지만 벚꽃이 피면 많은 사람들이 공원에 모입니다.",
    "프로그래머는 매일 코드를 작성하고 테스트를 실행합니다.",
    "ᄒᆞᆫ글 옛 글자와 조합형 자모도 가끔 나타납니다.",
],
"thai": [
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ ทำให้การตัดคำเป็นเรื่องยาก",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทยและมีประชากรหลายล้านคน",
    "ฉันชอบกินข้าวเหนียวมะม่วงในฤดูร้อน",
],
"other": [
    "Հայերենը ունի իր սեփական այբուբենը, որը ստեղծել է Մեսրոպ Մաշտոցը։",
    "ქართული ენა იყენებს მხედრულ დამწერლობას.",
    "বাংলা ভাষা বিশ্বের অন্যতম বহুল ব্যবহৃত ভাষা।",
    "தமிழ் மிகவும் பழமையான மொழிகளில் ஒன்று.",
    "ᐃᓄᒃᑎᑐᑦ ᑎᑎᕋᐅᓯᖅ — syllabics; ꯃꯤꯇꯩ ꯃꯌꯦꯛ; 𐌰𐌱𐌲 gothic; 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒜𝒷𝒸.",
    "አማርኛ በግዕዝ ፊደል ይጻፋል።",
],
}

CODE = [
'''#include <stdio.h>

int main(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
\tprintf("%d: %s\\n", i, argv[i]);
    }
    return 0;
}
''',
'''def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

if __name__ == "__main__":
    print([fib(k) for k in range(20)])
''',
'''fn main() {
    let words: Vec<&str> = "a bb ccc".split_whitespace().collect();
    let total: usize = words.iter().map(|w| w.len()).sum();
    println!("{} words, {} bytes", words.len(), total);
}
''',
'''const sum = (xs) => xs.reduce((a, b) => a + b, 0);
export async function load(url) {
  const res = await fetch(url, { headers: { "Accept": "application/json" } });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  return (await res.json())?.items ?? [];
}
''',
'''SELECT u.id, u.name, COUNT(o.id) AS n_orders
FROM users u LEFT JOIN orders o ON o.user_id = u.id
WHERE u.created_at >= '2024-01-01' AND u.email LIKE '%@example.com'
GROUP BY u.id, u.name HAVING COUNT(o.id) > 3 ORDER BY n_orders DESC;
''',
'''#!/usr/bin/env bash
set -euo pipefail
for f in "$@"; do
  [[ -f "$f" ]] || { echo "missing: $f" >&2; exit 1; }
  wc -l -- "$f" | awk '{print $1}'
done
''',
'''<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Test &amp; page</title></head>
<body><p class="x">Hello,&nbsp;<b>world</b>!</p><!-- comment --></body></html>
''',
'''package main

import "fmt"

func main() {
\tm := map[string]int{"one": 1, "two": 2}
\tfor k, v := range m {
\t\tfmt.Printf("%s=%d\\n", k, v)
\t}
}
''',
'''{"name": "statelm", "version": "0.1.0", "tags": ["c11", "llm"], "nested": {"a": [1, 2.5, -3e10, null, true]}}
''',
'''template <typename T>
std::vector<T> filter(const std::vector<T>& xs, std::function<bool(const T&)> pred) {
    std::vector<T> out;
    std::copy_if(xs.begin(), xs.end(), std::back_inserter(out), pred);
    return out;
}
''',
'''-- Haskell
quicksort :: Ord a => [a] -> [a]
quicksort []     = []
quicksort (p:xs) = quicksort [x | x <- xs, x < p] ++ [p] ++ quicksort [x | x <- xs, x >= p]
''',
'''\\begin{equation}
  \\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}, \\quad \\sum_{n=1}^{\\infty} \\frac{1}{n^2} = \\frac{\\pi^2}{6}
\\end{equation}
''',
]

EMOJI = [
    "😀", "😂", "🥹", "❤️", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🏴‍☠️", "🇫🇷", "🇯🇵", "🇧🇷", "🇺🇦", "🇮🇳",
    "🧑🏿‍🚀", "🤷‍♀️", "🙋🏻‍♂️", "⌚", "☕", "🎉", "🔥", "💯", "🐍", "🦀", "🐧", "✅", "❌", "⚠️", "1️⃣", "#️⃣",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "👁️‍🗨️", "🫠", "🪿", "🧬",
]

WS = [" ", "  ", "   ", "    ", "        ", "\t", "\t\t", " \t ", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n",
      "\r", " \n", "\n ", "\u00a0", "\u3000", "\u2003", "\u200b", "\u2028", "\u0085", "\x0b", "\x0c"]

SPECIAL_LOOKALIKES = [
    "<|im_start|>user\nHi there<|im_end|>\n", "<|endoftext|>", "<|im_start|>assistant\n", "<think>\n\n</think>\n\n",
    "<|im_start|><|im_end|>", "< |im_start| >", "<|im_start", "im_end|>", "<|startoftext|>", "<tool_call>{}</tool_call>",
    "<|reserved_7|>", "<|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>",
]

DECOMPOSED = ["e\u0301", "a\u0308", "o\u0302\u0323", "n\u0303", "A\u030a", "\u1100\u1161\u11a8", "\u0915\u094d\u0937"]


def numbers(rng):
    out = []
    for n in range(1, 41):
        out.append("".join(rng.choice("0123456789") for _ in range(n)))
    out += ["3.14159", "2.718281828459045", "-0.5", "+1e-9", "6.022e23", "1,234,567", "1.234.567,89", "12:34:56",
            "2024-02-29", "0x7fffffff", "0b1010", "1_000_000", "¼", "½", "²³", "Ⅻ", "①②③", "٣٤٥", "१२३", "१०००"]
    return out


def main():
    rng = random.Random(20240601)
    all_sent = [s for v in PROSE.values() for s in v]
    parts = []
    # 1. Prose, each language as a paragraph.
    for name, sents in PROSE.items():
        parts.append("## " + name + "\n" + " ".join(sents) + "\n\n")
    # 2. Code.
    for c in CODE:
        parts.append(c + "\n")
    target = 230_000
    nums = numbers(rng)
    k = 0
    while sum(len(p.encode()) for p in parts) < target:
        k += 1
        kind = rng.randrange(10)
        if kind < 4:  # shuffled multilingual paragraph with varied whitespace
            n = rng.randint(2, 7)
            buf = []
            for _ in range(n):
                s = rng.choice(all_sent)
                if rng.random() < 0.3:
                    s = s.upper() if rng.random() < 0.5 else s.lower()
                buf.append(s)
                buf.append(rng.choice(WS[:8]) if rng.random() < 0.8 else rng.choice(WS))
            parts.append("".join(buf) + rng.choice(["\n", "\n\n", "\r\n", "\n\n\n"]))
        elif kind == 4:  # numbers
            xs = [rng.choice(nums) for _ in range(rng.randint(3, 12))]
            sep = rng.choice([" ", ", ", "\t", "; ", "+", "-", "*", "/", "=", ""])
            parts.append("n" + str(k) + ": " + sep.join(xs) + "\n")
        elif kind == 5:  # code, possibly re-indented or with CRLF
            c = rng.choice(CODE)
            if rng.random() < 0.3:
                c = c.replace("\n", "\r\n")
            if rng.random() < 0.3:
                c = c.replace("    ", "\t")
            parts.append(c + "\n")
        elif kind == 6:  # emoji runs
            xs = [rng.choice(EMOJI) for _ in range(rng.randint(1, 10))]
            glue = rng.choice(["", " ", "  ", "\n", " and ", "x"])
            parts.append(glue.join(xs) + " " + rng.choice(all_sent) + "\n")
        elif kind == 7:  # whitespace torture
            xs = []
            for _ in range(rng.randint(3, 12)):
                xs.append(rng.choice(WS) * rng.randint(1, 4))
                xs.append(rng.choice(["a", "word", "x1", "é", "中", "!", "?!", "'s", "—", "…", "..."]))
            parts.append("".join(xs) + "\n")
        elif kind == 8:  # special-token look-alikes inside text
            parts.append(rng.choice(all_sent) + rng.choice(SPECIAL_LOOKALIKES) + rng.choice(all_sent) + "\n")
        else:  # combining marks, apostrophes, mixed scripts in one word
            w = "".join(rng.choice(DECOMPOSED) + rng.choice(["", "x", " ", "'s", "'LL"]) for _ in range(6))
            parts.append(w + " Mixed" + rng.choice(["中文", "Кирилл", "ελλ", "123", "٣"]) + "word 'tis o'er\n")
    text = "".join(parts)
    with open(sys.argv[1], "w", encoding="utf-8", newline="") as f:
        f.write(text)


if __name__ == "__main__":
    main()
